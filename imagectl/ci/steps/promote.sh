# Once every index is written: move the profile's stable channel onto it.
imagectl promote "$PROFILE" --channel stable
