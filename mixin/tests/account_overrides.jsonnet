// The _config of tests/mixin.rs's per-account render (passed to render.jsonnet as `config`);
// account_overrides.test.yml runs against that render.
{
  accountOverrides: [
    // Warned earlier than the default 10%.
    { account_id: '1005', quota_remaining_warning_ratio: 0.30 },
    // A big account that may run low: warned at 3%, paged at 1% instead of 10% and 2%.
    { account_id: '1006', quota_remaining_warning_ratio: 0.03, quota_remaining_critical_ratio: 0.01 },
    // Bounces a lot by the nature of its mail: warned above 20% instead of 5%.
    { account_id: '1007', bounce_ratio: 0.20 },
  ],
}
