"""Hub remote code of P-SP models, shipped inside psp_hf as psp_hf.modeling (the very same files)."""

from .configuration_psp import PSPConfig
from .modeling_psp import PSPModel, PSPModelOutput, PSPPreTrainedModel, apply_unknown_rule, pool_bags

__all__ = ["PSPConfig", "PSPModel", "PSPModelOutput", "PSPPreTrainedModel", "apply_unknown_rule", "pool_bags"]
