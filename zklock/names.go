package zklock

import (
	"fmt"
	"strings"

	"github.com/dlock/dlock"
)

// lockPath maps a lock name to its node path, refusing names the server
// would refuse (with "invalid arguments") or that would put the lock on a
// node it reserves.
func (d *zkDriver) lockPath(name string) (string, error) {
	if err := validName(d.root, name); err != nil {
		return "", fmt.Errorf("zklock: %w: %q: %s", dlock.ErrInvalidName, name, err)
	}
	return d.root + "/" + name, nil
}

// CheckName implements driver.NameChecker, so a bad name is refused when the
// Mutex is made.
func (d *zkDriver) CheckName(name string) error {
	_, err := d.lockPath(name)
	return err
}

// validName reports why the path root/name is not one ZooKeeper accepts,
// or returns nil. The rules are those of ZooKeeper's PathUtils.validatePath,
// applied to the name's components (a leading "/" is dropped). The server
// checks characters as Java's UTF-16 units, so a rune above U+FFFF (such as
// an emoji), written as a surrogate pair, is refused too.
func validName(root, name string) error {
	if strings.HasPrefix(name, "/") {
		// "/a" and "a" would be one node, so one lock under two names.
		return fmt.Errorf(`a leading "/": names are paths under the chroot, write %q`, strings.TrimLeft(name, "/"))
	}
	segs := strings.Split(name, "/")
	for i, seg := range segs {
		switch {
		case seg == "":
			return fmt.Errorf("an empty path component")
		case seg == "." || seg == "..":
			return fmt.Errorf("a %q path component", seg)
		case i > 0 && (strings.HasPrefix(seg, "_c_") || seq(seg) >= 0 || strings.Contains(seg, readBase) || strings.Contains(seg, writeBase)):
			// A node named like a contender's would be counted as one by
			// the lock of the parent name: a phantom holder.
			return fmt.Errorf("path component %q is named like a contender node (_c_…, …lock-N, …latch-N, __READ__, __WRIT__)", seg)
		}
	}
	if root == "" && name == "zookeeper" {
		return fmt.Errorf("/zookeeper is ZooKeeper's own node")
	}
	for i, r := range name {
		if badRune(r) {
			return fmt.Errorf("character %U at byte %d is not allowed in a ZooKeeper path", r, i)
		}
	}
	return nil
}

// badRune reports the characters PathUtils.validatePath refuses.
func badRune(r rune) bool {
	return r <= 0x1f || r >= 0x7f && r <= 0x9f || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0
}
