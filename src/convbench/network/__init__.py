"""The course networks: specs, weights (ours and the course's files), inference and training."""
