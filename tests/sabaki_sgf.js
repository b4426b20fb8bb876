// Reads SGF files with Sabaki's own parser (@sabaki/sgf, parseFile, the call Sabaki's
// file loading makes) and prints, per file, what Sabaki sees: the root's properties,
// the main line's moves (colour, SGF point, comment) and the parsed dates.
// Usage: NODE_PATH=... node tests/sabaki_sgf.js FILE...
const sgf = require('@sabaki/sgf')

const out = process.argv.slice(2).map(file => {
  const roots = sgf.parseFile(file)
  if (roots.length !== 1) throw new Error(`${file}: ${roots.length} games, expected 1`)
  const root = roots[0]
  const moves = []
  for (let node = root.children[0]; node != null; node = node.children[0]) {
    const color = node.data.B != null ? 'B' : node.data.W != null ? 'W' : null
    if (color == null) continue
    const point = node.data[color][0]
    const vertex = point === '' ? null : sgf.parseVertex(point)
    moves.push({color, point, vertex, comment: node.data.C ? node.data.C[0] : null})
  }
  return {file, root: root.data, moves, dates: root.data.DT ? sgf.parseDates(root.data.DT[0]) : null}
})
console.log(JSON.stringify(out))
