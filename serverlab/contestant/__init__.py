"""Contestants: the servers under test. A manifest per folder (`contestants/<name>/
contestant.toml`) with typed tunables and shell-safe placeholders; building it, asking its
version, and starting, pinning and stopping one server process."""
