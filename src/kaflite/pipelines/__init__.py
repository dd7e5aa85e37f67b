"""Example data pipelines built on kaflite (``python -m kaflite.pipelines.clickstream``)."""
