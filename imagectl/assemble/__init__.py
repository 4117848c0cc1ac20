"""Image layers imagectl writes itself: the lock's wheels installed into deterministic tar layers."""
