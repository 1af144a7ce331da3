"""From runs to conclusions: summaries, comparisons, warnings; pure statistics."""
