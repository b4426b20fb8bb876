"""KaTrain's own engine and game classes, headless, against an analysis engine's
command line: run with the Python of a virtual environment that holds KaTrain
(tests/test_katrain.py makes one), prints what KaTrain made of the results as JSON.

    python katrain_driver.py "tengen analysis --checkpoint DIR" "(;GM[1]SZ[9]...)"
"""

import json
import os
import sys
import threading

os.environ.setdefault("KIVY_NO_ARGS", "1")  # before Kivy reads this script's arguments

from katrain.core.base_katrain import KaTrainBase  # noqa: E402
from katrain.core.constants import OUTPUT_ERROR  # noqa: E402
from katrain.core.engine import KataGoEngine  # noqa: E402
from katrain.core.game import Game, KaTrainSGF  # noqa: E402

command, sgf = sys.argv[1], sys.argv[2]
katrain = KaTrainBase(force_package_config=True, debug_level=0)
logged = []
katrain.log = lambda message, level=0: logged.append((level, str(message)))
# KaTrain calls update_state after every result it reads: the moment to look again
answered = threading.Condition()


def update_state(*_args, **_kwargs):
    with answered:
        answered.notify_all()


katrain.update_state = update_state
config = dict(katrain.config("engine"))
config.update(altcommand=command, max_visits=40, fast_visits=20, max_time=60, _enable_ownership=True)
engine = KataGoEngine(katrain, config)
game = Game(katrain, engine, move_tree=KaTrainSGF.parse_sgf(sgf))
nodes, node = [], game.root
while node is not None:
    nodes.append(node)
    node = node.children[0] if node.children else None
with answered:
    answered.wait_for(lambda: all(n.analysis_complete for n in nodes), timeout=240)
print(json.dumps({
    "nodes": [{"complete": n.analysis_complete, "score": n.score, "winrate": n.winrate,
               "candidates": [[c["move"], c["visits"], c["pointsLost"]] for c in n.candidate_moves],
               "ownership": n.ownership, "policy": n.policy} for n in nodes],
    # what KaTrain itself calls an error (not the engine's stderr, which it logs apart)
    "errors": [message for level, message in logged if level == OUTPUT_ERROR],
}))
sys.stdout.flush()
# The engine's end of the protocol: its stdin closed, it finishes and exits. KaTrain's
# own shutdown only signals the shell it started; and Kivy leaves threads that keep a
# plain exit waiting.
process = engine.katago_process
process.stdin.close()
process.wait(timeout=120)
os._exit(0)
