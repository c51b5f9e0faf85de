"""Support code for the tests, not tests: in-process Flower grids, loopback and
network-namespace deployments, Docker images and compose projects, the privacy probe.

A package of its own so that pytest collects nothing here and the test files
import it by one name (``from harness.localdeploy import ...``).
"""
