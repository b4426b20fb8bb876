"""A finished model against something: GTP, search with statistics, matches and their
players, game records and SGF, exact solvers and grading. Imports the engine only."""
