"""The training loop and everything around it: optimizer and schedules, checkpoints, logs, DDP."""
