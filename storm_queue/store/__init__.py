"""The stores: where a storm's lane, ledgers and log are kept."""
