"""Demos that run from an installed wheel: ``python -m freight.demos.robot_arm``."""
