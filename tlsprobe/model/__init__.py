"""Result types of probe, audit, capture, timing and speed: dataclasses and enums with one
JSON encoding. The Python API returns these; nothing here renders or does I/O."""
