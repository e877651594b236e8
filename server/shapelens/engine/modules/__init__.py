"""Every ``nn.Module`` call of the run, as the module tree of ``--modules``."""
