"""What to measure, validated: stacks, loads, databases, experiments, and building them
from TOML, studies and the command line."""
