//go:build windows

package winsec

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// UserSID returns the SID of the user the process runs as, read from the
// process token once. It is named explicitly in every descriptor this
// package makes: "OW" (owner rights) and the token's default owner are not
// the user for an elevated process (Administrators) nor under Wine (a
// group).
var UserSID = sync.OnceValues(func() (*windows.SID, error) {
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("the current user's SID: %w", err)
	}
	return u.User.Sid.Copy()
})

// SDDL returns the user-only security descriptor: the user is owner and
// group, and a protected DACL (nothing is inherited from the parent) lets
// the user alone in, with full access. With inherit, files and folders
// created inside a folder made with it get the same access.
func SDDL(inherit bool) (string, error) {
	sid, err := UserSID()
	if err != nil {
		return "", err
	}
	flags := ""
	if inherit {
		flags = "OICI"
	}
	u := sid.String()
	return "O:" + u + "G:" + u + "D:P(A;" + flags + ";GA;;;" + u + ")", nil
}

// SecurityAttributes returns SECURITY_ATTRIBUTES carrying SDDL(inherit), for
// CreateFile and CreateDirectory: an object is made user-only as it is
// created, never given a DACL afterwards (in between it would have the one
// it inherited).
func SecurityAttributes(inherit bool) (*windows.SecurityAttributes, error) {
	s, err := SDDL(inherit)
	if err != nil {
		return nil, err
	}
	sd, err := windows.SecurityDescriptorFromString(s)
	if err != nil {
		return nil, fmt.Errorf("security descriptor %s: %w", s, err)
	}
	return &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}, nil
}

// Read reads the owner, group and DACL of the object h back.
func Read(h windows.Handle) (*windows.SECURITY_DESCRIPTOR, error) {
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.GROUP_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return nil, fmt.Errorf("read the security descriptor: %w", err)
	}
	return sd, nil
}

// CheckOwner returns an error, phrased to follow "<what> <path> is", unless
// the user owns the object of sd.
func CheckOwner(sd *windows.SECURITY_DESCRIPTOR) error {
	user, err := UserSID()
	if err != nil {
		return err
	}
	owner, _, err := sd.Owner()
	if err != nil || owner == nil {
		return errors.New("without a readable owner")
	}
	if !owner.Equals(user) {
		return fmt.Errorf("owned by %s, not by the current user (%s)", name(owner), name(user))
	}
	return nil
}

// CheckPrivate returns an error, phrased to follow "<what> <path> ", unless
// the user owns the object of sd and its DACL lets no one else in. SYSTEM
// may be let in too: it can open anything anyway, Windows puts it on most
// folders, and Wine reports it on every file (Wine keeps files' access in
// their Unix mode, and reads it back as SYSTEM plus the mode's users).
// Deny entries only take access away and pass.
func CheckPrivate(sd *windows.SECURITY_DESCRIPTOR) error {
	if err := CheckOwner(sd); err != nil {
		return fmt.Errorf("is %w", err)
	}
	user, _ := UserSID()
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("has no readable access list: %w", err)
	}
	if dacl == nil {
		return errors.New("has a null access list: everyone has full access")
	}
	for i := range uint32(dacl.AceCount) {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return fmt.Errorf("has an unreadable access list: %w", err)
		}
		switch ace.Header.AceType {
		case windows.ACCESS_DENIED_ACE_TYPE:
			continue
		case windows.ACCESS_ALLOWED_ACE_TYPE:
		default:
			return fmt.Errorf("has an access entry of type %d: only the current user may have access", ace.Header.AceType)
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
		if !sid.Equals(user) && !sid.IsWellKnown(windows.WinLocalSystemSid) {
			return fmt.Errorf("lets %s in: only the current user (%s) may have access", name(sid), name(user))
		}
	}
	return nil
}

// name is sid with its account name when it has one, for error messages.
func name(sid *windows.SID) string {
	account, domain, _, err := sid.LookupAccount("")
	switch {
	case err != nil:
		return sid.String()
	case domain != "":
		return fmt.Sprintf("%s (%s\\%s)", sid, domain, account)
	}
	return fmt.Sprintf("%s (%s)", sid, account)
}

// OpenPipe opens the client end of the local named pipe name once, for
// reading (which takes in READ_CONTROL, to read its security descriptor),
// with anonymous impersonation so that whoever serves it cannot act as the
// caller.
// It does not wait: a pipe whose instances are all taken fails with
// windows.ERROR_PIPE_BUSY. Opening a pipe connects to its server, which
// sees a client that goes away.
func OpenPipe(name string) (windows.Handle, error) {
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return windows.InvalidHandle, err
	}
	return windows.CreateFile(p, windows.GENERIC_READ, 0, nil, windows.OPEN_EXISTING,
		windows.SECURITY_SQOS_PRESENT|windows.SECURITY_ANONYMOUS, 0)
}
