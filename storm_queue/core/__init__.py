"""The pure rules: lane planning, the fold, the resolver, runner planning,
why, starving, names and the value types they use. No I/O, no clock, no
uid, no driver: the time, the caller and the files' content come in as
arguments."""
