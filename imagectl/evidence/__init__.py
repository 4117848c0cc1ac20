"""Evidence an image carries: its SBOM, its build provenance and its in-image check report, each an in-toto
statement about the image's manifest digest, attached to it in the registry as an OCI 1.1 artifact, signed (DSSE)
when a key is configured; and ``verify``, which reads them back and checks them against the image.

- :mod:`.statement`: in-toto Statement v1 (pure);
- :mod:`.dsse`: DSSE envelopes, Ed25519 signatures (pure but for reading key files);
- :mod:`.sbom`: the CycloneDX SBOM (Python distributions and OS packages) and the Python set it states;
- :mod:`.provenance`: the SLSA v1 provenance predicate and the check-report predicate;
- :mod:`.attach`: what ``build`` calls after pushing an image;
- :mod:`.verify`: what ``imagectl verify`` calls.
"""
