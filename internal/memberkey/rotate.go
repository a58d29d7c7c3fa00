package memberkey

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// The steps of a rotation, as edits of the Secret's data that refuse what would cut
// a speaker off. reports are the speakers' Reports by node (what their heartbeats
// say they hold; "" when a speaker says nothing).

var labelRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Find is the key named ref: its entry's name, the label after DataKey+".", or its
// fingerprint.
func (r Keyring) Find(ref string) (Key, bool) {
	for _, k := range r {
		if k.Name == ref || k.Name == DataKey+"."+ref || Fingerprint(k.AES) == ref {
			return k, true
		}
	}
	return Key{}, false
}

// Add returns data with material added as the key entry DataKey+"."+label, not
// primary, and that key.
func Add(data map[string][]byte, label string, material []byte) (map[string][]byte, Key, error) {
	ring, err := KeyringFromSecretData(data)
	if err != nil {
		return nil, Key{}, err
	}
	if !labelRE.MatchString(label) {
		return nil, Key{}, fmt.Errorf("key label %q: want letters, digits, '-', '_' or '.'", label)
	}
	name := DataKey + "." + label
	if _, ok := data[name]; ok {
		return nil, Key{}, fmt.Errorf("the memberlist Secret already has an entry %q", name)
	}
	aes, err := derive(material)
	if err != nil {
		return nil, Key{}, fmt.Errorf("new key: %w", err)
	}
	if i := ring.Index(aes); i >= 0 {
		return nil, Key{}, fmt.Errorf("the memberlist Secret already holds this key, as %q", ring[i].Name)
	}
	out := maps.Clone(data)
	out[name] = material
	return out, Key{Name: name, AES: aes}, nil
}

// findKey reads the keyring of data and finds the key ref in it.
func findKey(data map[string][]byte, ref string) (Keyring, Key, error) {
	ring, err := KeyringFromSecretData(data)
	if err != nil {
		return nil, Key{}, err
	}
	k, ok := ring.Find(ref)
	if !ok {
		return nil, Key{}, fmt.Errorf("the memberlist Secret has no key %q (%s)", ref, ring.names())
	}
	return ring, k, nil
}

// speakersWhere lists, sorted, the speakers whose report (its primary's fingerprint
// and all of them) satisfies match.
func speakersWhere(reports map[string]string, match func(primary string, all []string) bool) []string {
	var nodes []string
	for node, rep := range reports {
		if match(ParseReport(rep)) {
			nodes = append(nodes, node)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// Use returns data with the key ref made primary, refusing while a speaker does not
// hold it yet: that speaker could not read those that send with it.
func Use(data map[string][]byte, ref string, reports map[string]string) (map[string][]byte, Key, error) {
	_, k, err := findKey(data, ref)
	if err != nil {
		return nil, Key{}, err
	}
	fp := Fingerprint(k.AES)
	lacking := speakersWhere(reports, func(_ string, all []string) bool { return !slices.Contains(all, fp) })
	if len(lacking) > 0 {
		return nil, Key{}, fmt.Errorf("speakers %v do not hold key %s (%s) yet: they could not read the others once it is primary; wait until they have applied its addition",
			lacking, k.Name, fp)
	}
	out := maps.Clone(data)
	out[PrimaryEntry] = []byte(k.Name)
	return out, k, nil
}

// Remove returns data without the key ref, refusing the primary and a key some
// speaker still sends with (the others could no longer read it).
func Remove(data map[string][]byte, ref string, reports map[string]string) (map[string][]byte, Key, error) {
	ring, k, err := findKey(data, ref)
	if err != nil {
		return nil, Key{}, err
	}
	fp := Fingerprint(k.AES)
	if k.Name == ring[0].Name {
		return nil, Key{}, fmt.Errorf("key %s (%s) is the primary; make another key primary first", k.Name, fp)
	}
	using := speakersWhere(reports, func(primary string, _ []string) bool { return primary == fp })
	if len(using) > 0 {
		return nil, Key{}, fmt.Errorf("speakers %v still send with key %s (%s): the others could not read them; wait until they have applied the new primary",
			using, k.Name, fp)
	}
	out := maps.Clone(data)
	for name, v := range data {
		if IsKeyEntry(name) {
			if a, err := derive(v); err == nil && string(a) == string(k.AES) {
				delete(out, name) // every entry holding it: copies would keep it alive
			}
		}
	}
	return out, k, nil
}

// Pending lists the speakers whose reported keys are not ring's (as "node: what it
// reports"), sorted: empty once every speaker has applied the Secret.
func Pending(ring Keyring, reports map[string]string) []string {
	want := Report(ring.AES())
	var out []string
	for node, rep := range reports {
		if rep != want {
			if rep == "" {
				rep = "no report"
			}
			out = append(out, node+": "+rep)
		}
	}
	slices.Sort(out)
	return out
}

func (r Keyring) names() string {
	var s []string
	for _, k := range r {
		s = append(s, k.Name+" "+Fingerprint(k.AES))
	}
	return "it holds " + strings.Join(s, ", ")
}
