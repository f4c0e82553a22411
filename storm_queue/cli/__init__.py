"""The command line: the command table, the click-free quick path, click,
rendering (rich, plain, JSON), watch and completion."""
