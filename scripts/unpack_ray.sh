# Unpack .device/ray.tar.xz (scripts/pack_ray.sh) and put Ray on the path; to be sourced in a device command:
#   source scripts/unpack_ray.sh [DIR]       (DIR default /tmp/kbstudy-ray)
# Ray's dependency wheels are unpacked only where this python cannot import the package already, so the image's own
# versions (requests, click, ...) stay the ones used.
_kbray_dir="${1:-/tmp/kbstudy-ray}"
mkdir -p "$_kbray_dir/deps"
tar -C "$_kbray_dir" -xJf .device/ray.tar.xz
for _kbray_whl in "$_kbray_dir"/*.whl; do
    _kbray_name="$(basename "$_kbray_whl" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')"
    case "$_kbray_name" in
        pyyaml) _kbray_mod=yaml ;; protobuf) _kbray_mod=google.protobuf ;; jsonschema_specifications) _kbray_mod=jsonschema_specifications ;;
        rpds_py) _kbray_mod=rpds ;; charset_normalizer) _kbray_mod=charset_normalizer ;; *) _kbray_mod="$_kbray_name" ;;
    esac
    if ! python3 -c "import $_kbray_mod" 2>/dev/null; then
        python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$_kbray_whl" "$_kbray_dir/deps"
    fi
done
export PYTHONPATH="$_kbray_dir:$_kbray_dir/deps${PYTHONPATH:+:$PYTHONPATH}"
# no usage report from a machine without a network
export RAY_USAGE_STATS_ENABLED=0
unset _kbray_dir _kbray_whl _kbray_name _kbray_mod
