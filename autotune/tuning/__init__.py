"""The search side: proposing configurations, measuring them, and keeping the fastest (`tune`, `autotune worker`)."""
