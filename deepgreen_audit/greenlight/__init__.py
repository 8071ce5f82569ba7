"""API-level energy profiles: the Greenlight/FECoM data, recomputed, audited and measured.

One subpackage per concept:

* `package`: the API-level data package (`api_calls`, `api_samples`; schemas in
  `schemas/`), written and validated with the shared package machinery;
* `records`: FECoM and Greenlight experiment JSON records, parsed strictly
  (a malformed record names its file and its call);
* `fecom`: FECoM's per-call method (execution window, idle baseline, lag) as
  pure functions of one record's series;
* `importer`: a folder of records to a package (`deepgreen import greenlight`);
* `summary`: the published per-API summaries recomputed and compared;
* `checks`: audit checks of API-level data (registry + one driver);
* `profile`: `deepgreen profile-api`, measuring framework calls with this
  project's instruments.

See docs/greenlight.md for the decisions taken where the sources are silent.
"""
