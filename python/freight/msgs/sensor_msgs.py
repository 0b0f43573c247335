"""``sensor_msgs``: images and point clouds."""

from freight._native import Image, PointCloud2, PointField

__all__ = ["Image", "PointCloud2", "PointField"]
