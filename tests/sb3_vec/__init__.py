"""Stable-Baselines3 2.9.2's VecEnv tests, run against envhive's SB3 front end (see README.md)."""
