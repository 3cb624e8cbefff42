"""The networks the engine runs: the Llama target (``llama``), the EAGLE-3 head (``eagle3``), the
attention kernels (``attention``), packed linear layers (``linear``), random test models
(``random_model``) and the tokenizer wrapper (``tokenizer``). No scheduling and no serving here."""
