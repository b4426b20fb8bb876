"""What both wirings of a run share: the config schema, the training loop, the run
directory and its records, the game codec, the in-process stream, registry and status
board, the single-process run and checkpoint loading. Knows nothing of Ray or Redis."""
