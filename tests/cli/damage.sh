#!/bin/sh
# damage.sh SRC.pte DST.pte OFFSET: copies SRC to DST with 4096 bytes zeroed at
# byte OFFSET (a multiple of 4096) — a damaged download, for `inspect` tests.
cp "$1" "$2" && dd if=/dev/zero of="$2" bs=4096 seek=$(( $3 / 4096 )) count=1 conv=notrunc 2>/dev/null
