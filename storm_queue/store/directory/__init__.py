"""The directory store: queue.txt, the ledgers, the priority log's files,
flock, fsync and the witness."""
