"""Adapters that plug gpuplan's planners into other projects' simulators.

- :mod:`gpuplan.adapters.sia`: a policy for Sia's simulator (a skeleton:
  docs/python.md, "Sia's simulator").
"""
