"""The app's performance across its commits (#36): ``bisect`` finds the commit that made
it slower, deciding each step same / slower / unknown from a check's interleaved rounds,
measuring more where a step is unknown."""
