// Reads SGF files with Sabaki's own parser (@sabaki/sgf, parseFile, the call Sabaki's
// file loading makes) and prints, per file, what Sabaki sees: the root's properties,
// every node of the main line (its properties, its setup stones as the vertices
// parseCompressedVertices gives, as Sabaki places them, and its move), the moves alone
// (colour, SGF point, comment) and the parsed dates. A file with more than one game or
// with variations is an error: tengen writes one line of play.
// Usage: NODE_PATH=... node tests/sabaki_sgf.js FILE...
const sgf = require('@sabaki/sgf')

function moveOf(node) {
  const color = node.data.B != null ? 'B' : node.data.W != null ? 'W' : null
  if (color == null) return null
  const point = node.data[color][0]
  const vertex = point === '' ? null : sgf.parseVertex(point)
  return {color, point, vertex, comment: node.data.C ? node.data.C[0] : null}
}

const out = process.argv.slice(2).map(file => {
  const roots = sgf.parseFile(file)
  if (roots.length !== 1) throw new Error(`${file}: ${roots.length} games, expected 1`)
  const root = roots[0]
  const nodes = []
  for (let node = root; node != null; node = node.children[0]) {
    if (node.children.length > 1) throw new Error(`${file}: ${node.children.length} variations, expected 1`)
    const setup = {}
    for (const key of ['AB', 'AW', 'AE']) {
      if (node.data[key] != null) setup[key] = node.data[key].flatMap(sgf.parseCompressedVertices)
    }
    nodes.push({data: node.data, setup, move: moveOf(node)})
  }
  const moves = nodes.map(node => node.move).filter(move => move != null)
  return {file, root: root.data, nodes, moves, dates: root.data.DT ? sgf.parseDates(root.data.DT[0]) : null}
})
console.log(JSON.stringify(out))
