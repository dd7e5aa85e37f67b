"""``kaflite demo``: the main job, a live tour of what is really inside poll();
``kaflite demo --proxy`` is ``kaflite.demo.vip_story``."""

from kaflite.demo.run import DemoOptions, run_demo

__all__ = ["DemoOptions", "run_demo"]
