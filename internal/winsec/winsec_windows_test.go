//go:build windows

package winsec

import (
	"strings"
	"testing"

	"golang.org/x/sys/windows"
)

func TestCheckPrivate(t *testing.T) {
	user, err := UserSID()
	if err != nil {
		t.Fatal(err)
	}
	u := user.String()
	for _, inherit := range []bool{false, true} {
		s, err := SDDL(inherit)
		if err != nil {
			t.Fatal(err)
		}
		if want := "O:" + u + "G:" + u + "D:P("; !strings.HasPrefix(s, want) || strings.Contains(s, "OW") {
			t.Errorf("SDDL(%v) = %s, want the user's SID named, %s...", inherit, s, want)
		}
		if err := CheckPrivate(parse(t, s)); err != nil {
			t.Errorf("CheckPrivate(SDDL(%v)) = %v", inherit, err)
		}
	}
	for _, tt := range []struct {
		sddl string
		want string // "" = private
	}{
		{"O:" + u + "D:P(A;;FA;;;SY)(A;;FA;;;" + u + ")", ""},                  // what Wine reports for a 0700 folder
		{"O:" + u + "D:P(D;;FA;;;WD)(A;;FA;;;" + u + ")", ""},                  // a deny entry takes away
		{"O:" + u + "D:(A;;FA;;;" + u + ")(A;;0x1200a9;;;WD)", "lets S-1-1-0"}, // a 0644 file under Wine
		{"O:" + u + "D:(A;OICIIO;GA;;;CO)(A;;FA;;;" + u + ")", "lets S-1-3-0"},
		{"O:BAD:(A;;FA;;;" + u + ")", "is owned by S-1-5-32-544"},
		{"O:" + u, "no readable access list"},
	} {
		err := CheckPrivate(parse(t, tt.sddl))
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckPrivate(%s) = %v, want %q", tt.sddl, err, tt.want)
		}
	}
}

// A null DACL lets everyone in. (Wine reads "D:NO_ACCESS_CONTROL" as an
// empty DACL, which lets no one in, so it is built by hand.)
func TestCheckPrivateNullDACL(t *testing.T) {
	user, err := UserSID()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := windows.NewSecurityDescriptor()
	if err != nil {
		t.Fatal(err)
	}
	if err := sd.SetOwner(user, false); err != nil {
		t.Fatal(err)
	}
	if err := sd.SetDACL(nil, true, false); err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(sd); err == nil || !strings.Contains(err.Error(), "null access list") {
		t.Fatalf("CheckPrivate(null DACL) = %v", err)
	}
}

func parse(t *testing.T, sddl string) *windows.SECURITY_DESCRIPTOR {
	t.Helper()
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		t.Fatalf("%s: %v", sddl, err)
	}
	return sd
}
