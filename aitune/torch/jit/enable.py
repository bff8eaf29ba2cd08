"""``import aitune.torch.jit.enable`` turns on global JIT interception with the default config.

Every module built afterwards is patched; ``aitune.torch.jit.enable_interception(config)`` changes the
config and ``aitune.torch.jit.disable()`` turns interception off and detaches every patched module.
"""

from aitune.torch.jit.interception import enable_interception

enable_interception()
