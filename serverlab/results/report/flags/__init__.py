"""The validity flags: which figures each qualifies, and how they are grouped for display."""
