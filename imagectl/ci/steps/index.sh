# Once every platform's image is pushed: the profile's image index, whose tag and digest go to the files
# IMAGE_URL_FILE and IMAGE_DIGEST_FILE.
metadata="${TMPDIR:-/tmp}/imagectl-index.json"
imagectl index "$PROFILE" --platforms "$PLATFORMS" --json > "$metadata"
python3 -m imagectl.ci.image_results "$metadata" "$IMAGE_URL_FILE" "$IMAGE_DIGEST_FILE"
