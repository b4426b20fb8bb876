// Drives a GTP engine with @sabaki/gtp the way Sabaki's EngineSyncer does: the
// start-up queries sent at once, ControllerStateTracker.sync to a game (komi,
// board size, handicap and moves; replayed, extended, undone, branched), genmove
// and kata-genmove_analyze through the tracker's queue, and kata-analyze stopped
// by the protocol_version that Sabaki sends to abort. Prints one JSON report.
//
// usage: node sabaki_driver.js '["python", "-m", "cluster.cli", "gtp", ...]'

const {Controller, ControllerStateTracker} = require('@sabaki/gtp')

async function main() {
  const [path, ...args] = JSON.parse(process.argv[2])
  const controller = new Controller(path, args, {cwd: process.cwd()})
  const tracker = new ControllerStateTracker(controller)
  const report = {startup: {}, syncs: [], stderr: []}
  controller.on('stderr', ({content}) => report.stderr.push(content))
  controller.start()

  // EngineSyncer's 'started' handler: four queries in one go.
  const [name, version, protocol, commands] = await Promise.all(
    ['name', 'version', 'protocol_version', 'list_commands'].map(name =>
      controller.sendCommand({name})
    )
  )
  report.startup = {
    name: name.content,
    version: version.content,
    protocol: protocol.content,
    commands: commands.content.split('\n')
  }

  const board = async () =>
    (await controller.sendCommand({name: 'showboard'})).content
  const sync = async (label, state) => {
    const sent = []
    const listen = ({command}) => sent.push(command)
    controller.on('command-sent', listen)
    await tracker.sync(state)
    controller.removeListener('command-sent', listen)
    report.syncs.push({
      label,
      sent: sent.map(c => [c.name, ...c.args].join(' ')),
      history: tracker.state.history.map(c => [c.name, ...c.args].join(' ')),
      board: await board()
    })
  }
  const play = (color, vertex) => ({name: 'play', args: [color, vertex]})
  const handicap = {name: 'set_free_handicap', args: ['C3', 'G7']}

  // A handicap game as Sabaki replays it: komi, board size, then the history.
  const history = [handicap, play('W', 'E5'), play('B', 'D4'), play('W', 'F3')]
  await sync('replay', {komi: 0.5, boardsize: [9, 9], history})

  // The engine moves; the tracker records what it played.
  const genmove = await tracker.queueCommand({name: 'genmove', args: ['B']})
  report.genmove = genmove.content
  const afterGenmove = [...tracker.state.history]

  // One more move: the tracker only sends what is new.
  await sync('extend', {komi: 0.5, boardsize: [9, 9], history: [...afterGenmove, play('W', 'J9')]})
  // Back two moves: undo (the tracker undoes while less is undone than kept).
  await sync('undo', {komi: 0.5, boardsize: [9, 9], history})
  // Another branch from one move back: undo and play.
  await sync('branch', {
    komi: 0.5,
    boardsize: [9, 9],
    history: [...history.slice(0, 3), play('W', 'D5'), play('B', 'E4')]
  })

  // Analysis: kata-analyze B 10 streams until Sabaki's abort (protocol_version).
  const lines = []
  const analysis = tracker.queueCommand({name: 'kata-analyze', args: ['B', '10']}, ({line}) => lines.push(line))
  while (lines.filter(l => l.startsWith('info ')).length < 2) {
    await new Promise(resolve => setTimeout(resolve, 20))
  }
  const abort = controller.sendCommand({name: 'protocol_version'})
  const [analysisResponse, abortResponse] = await Promise.all([analysis, abort])
  report.analysis = {lines, error: analysisResponse.error, abort: abortResponse.content}

  // genmove_analyze as Sabaki plays with it: the move comes on a 'play' line.
  const genmoveLines = []
  await tracker.queueCommand({name: 'kata-genmove_analyze', args: ['W', '10']}, ({line}) => genmoveLines.push(line))
  report.genmoveAnalyze = {lines: genmoveLines, history: tracker.state.history.map(c => [c.name, ...c.args].join(' '))}
  report.finalBoard = await board()
  report.finalScore = (await controller.sendCommand({name: 'final_score'})).content

  await controller.stop(30000)
  console.log(JSON.stringify(report))
}

main().catch(err => {
  console.error(err)
  process.exit(1)
})
