"""Hub remote code of P-SP models, shipped inside psp_hf as psp_hf.modeling (the very same files)."""

from transformers import AutoConfig, AutoModel

from .configuration_psp import PSPConfig
from .modeling_psp import PSPModel, PSPModelOutput, PSPPreTrainedModel, apply_unknown_rule, pool_bags

# With psp-hf installed, `AutoConfig`/`AutoModel` know model_type "psp" once this package is imported (`import
# psp_hf.modeling`, or `psp_hf.PSPModel`): a psp folder then loads without trust_remote_code. The folders still
# carry the remote code (auto_map) for a machine without psp-hf.
AutoConfig.register(PSPConfig.model_type, PSPConfig, exist_ok=True)
AutoModel.register(PSPConfig, PSPModel, exist_ok=True)

__all__ = ["PSPConfig", "PSPModel", "PSPModelOutput", "PSPPreTrainedModel", "apply_unknown_rule", "pool_bags"]
