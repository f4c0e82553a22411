"""The service: the one request path (shape -> authority -> lock ->
snapshot -> plan -> record) and the readers, over a store."""
