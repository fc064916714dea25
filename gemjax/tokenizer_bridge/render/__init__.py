"""Rendering a game's messages to token ids on device.

``programs`` compiles each message kind to a fixed program of parts and prints it as
code points (:class:`~gemjax.tokenizer_bridge.render.programs.ProgramTable`);
``segments`` tokenizes code points canonically without BPE on device
(:class:`~gemjax.tokenizer_bridge.render.segments.SegmentTokenizer`);
``token_programs`` compiles the programs further to host-tokenized units, so most
lanes render straight to token ids
(:class:`~gemjax.tokenizer_bridge.render.token_programs.TokenPrograms`). The bridge
(:class:`~gemjax.tokenizer_bridge.TokenBridge`) puts them together.
"""
