"""Tags: the naming scheme, history, rollback, promotion, pruning and import of user images."""
