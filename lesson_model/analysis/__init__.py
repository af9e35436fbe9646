"""Analyses over a model and its runs: plain functions, one module per idea."""
