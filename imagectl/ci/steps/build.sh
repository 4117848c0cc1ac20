# One profile for one platform: build, check and push it, then write IMAGE_URL and IMAGE_DIGEST (the pushed
# image, as imagectl build's metadata file names it) to the files IMAGE_URL_FILE and IMAGE_DIGEST_FILE.
metadata="${TMPDIR:-/tmp}/imagectl-build.json"
imagectl build "$PROFILE" --platform "$PLATFORM" --push --progress plain --metadata-file "$metadata"
python3 -m imagectl.ci.image_results "$metadata" "$IMAGE_URL_FILE" "$IMAGE_DIGEST_FILE"
