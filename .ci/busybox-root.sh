# Sourced by the image build scripts: `busybox_root DIR` fills DIR with a minimal root
# filesystem made from the static busybox binary ($BUSYBOX): /bin/sh and every applet,
# /etc/passwd and /etc/group with root and nobody, a world-writable /tmp.
busybox_root() {
    local root=$1 applet
    mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,root,workspace}
    chmod 1777 "$root/tmp"
    cp "$BUSYBOX" "$root/bin/busybox"
    for applet in $("$root/bin/busybox" --list); do
        [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' \
        > "$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
}

check_busybox() {
    if [ ! -x "$BUSYBOX" ] || ! "$BUSYBOX" --list >/dev/null 2>&1; then
        echo "error: $BUSYBOX is missing; install busybox-static (apt-get install busybox-static)" >&2
        exit 1
    fi
}
