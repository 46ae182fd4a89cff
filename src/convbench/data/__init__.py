"""Fashion-MNIST: IDX files, where the data comes from, and the course's resized sets (cached on disk)."""
