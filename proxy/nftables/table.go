package nftables

import (
	"fmt"
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"herald.dev/herald/proxy/model"
	"sigs.k8s.io/knftables"
)

// Snapshot is everything one family's table is generated from.
type Snapshot struct {
	Family   model.Family
	Node     Node
	Services []model.Service
}

// StaleChainDelay is how long a chain no rule uses any more stays (flushed) before it
// is deleted: on kernels before 6.2 a chain a deleted map element pointed to still
// counts as used for a short while, and deleting it would fail the transaction.
const StaleChainDelay = time.Second

// Table is what herald's table of one family holds after the last committed Update,
// and turns the next Snapshot into the transaction that gets it there. It is pure:
// the shell runs the transaction and commits the Update when nft accepted it.
type Table struct {
	seed     maphash.Seed // of the chains' rule digests
	node     *nodeRules
	nodeWas  *Node
	services map[model.ServiceName]*serviceState
	elements map[string]*elementState // by container and key
	stale    map[string]time.Time     // flushed chains to delete, and since when
	rules    int                      // in all chains
}

type serviceState struct {
	objs     serviceObjects
	problems []model.Problem
	// held replaces objs.chains once the state is committed: the chains' names and
	// digests of their rules are all a later sync compares, and the rules' text is most
	// of a large table's memory.
	held []heldChain
}

// heldChain is a committed chain: its name, how many rules it has, and their digest.
type heldChain struct {
	name   string
	rules  int
	digest uint64
}

// elementState is one element of a shared set or map: every service that wants it,
// and what the table holds. Two services may want the same key (two Services claiming
// one external IP and port, or one endpoint behind two Services); the first by name wins.
type elementState struct {
	owners  []elementOwner // usually one
	applied *element
}

// elementOwner is a service wanting an element, and the element as that service's
// objects hold it.
type elementOwner struct {
	name model.ServiceName
	e    *element
}

// NewTable returns a Table for a table that is to be recreated: the first Update is full.
func NewTable() *Table { return &Table{seed: maphash.MakeSeed()} }

// Update is one sync's transaction and what the table holds once it ran.
type Update struct {
	// Tx brings the table to the snapshot; empty when nothing changed.
	Tx *knftables.Transaction
	// Full is set when the table is recreated from scratch.
	Full bool
	// Services counts the services whose objects Tx rewrites.
	Services int
	// Problems lists all skipped input of the table's current services.
	Problems []model.Problem

	table      *Table
	node       *nodeRules
	nodeWas    *Node
	services   map[model.ServiceName]*serviceState // nil value: removed
	elements   map[string]*elementState
	stale      map[string]time.Time // nil: unchanged
	deleteSets []string
	setupRules int // written by a full sync
}

// NeedsFull reports whether the next Update must be full: nothing committed yet, or
// the node settings changed.
func (t *Table) NeedsFull(node *Node) bool {
	return t.services == nil || !reflect.DeepEqual(t.nodeWas, node)
}

// Reset forgets what the table holds, after a transaction failed: the next Update is
// full.
func (t *Table) Reset() { *t = Table{seed: t.seed} }

// Sync fills tx, an empty transaction of the table's family, with the operations that
// bring the committed content to snap. changed names the services that may differ
// (model.ChangedServices); nil, or a table that NeedsFull, recreates the table. now
// stamps chains that become stale.
func (t *Table) Sync(tx *knftables.Transaction, snap *Snapshot, changed model.ServiceSet, now time.Time) (*Update, error) {
	node, err := resolveNode(&snap.Node, snap.Family)
	if err != nil {
		return nil, fmt.Errorf("%s nftables rules: %w", snap.Family, err)
	}
	u := &Update{table: t, node: node, nodeWas: &snap.Node, services: map[model.ServiceName]*serviceState{},
		elements: map[string]*elementState{}, Tx: tx}
	if changed == nil || t.NeedsFull(&snap.Node) {
		u.Full = true
		u.setupRules = writeSetup(u.Tx, node)
		u.stale = map[string]time.Time{}
	}

	var services []model.Service
	var names []model.ServiceName
	if u.Full {
		services = snap.Services
		for name := range t.services {
			names = append(names, name)
		}
	} else {
		for i := range snap.Services {
			if changed.Has(snap.Services[i].ServiceName()) {
				services = append(services, snap.Services[i])
			}
		}
		for name := range changed {
			names = append(names, name)
		}
	}
	next := buildServices(services, snap.Family, node)
	for name := range next {
		names = append(names, name)
	}
	slices.SortFunc(names, compareNames)
	names = slices.Compact(names)

	var rewrite []rewrite
	for _, name := range names {
		old := t.service(name, u.Full)
		cur := next[name]
		if old == nil && cur == nil {
			continue
		}
		u.services[name] = cur
		u.Services++
		u.diffElements(name, old, cur)
		if cur != nil {
			rewrite = append(rewrite, struct{ old, cur *serviceState }{old, cur})
		}
		u.staleObjects(old, cur, now)
	}
	u.writeServices(rewrite)
	u.writeElements()
	u.Problems = u.problems()
	return u, nil
}

// service returns the committed state of a service; none when the table is recreated.
func (t *Table) service(name model.ServiceName, full bool) *serviceState {
	if full {
		return nil
	}
	return t.services[name]
}

func compareNames(a, b model.ServiceName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// buildServices resolves services and builds their objects.
func buildServices(services []model.Service, family model.Family, node *nodeRules) map[model.ServiceName]*serviceState {
	ports, problems := model.Resolve(services, family, node.topology.Node)
	out := make(map[model.ServiceName]*serviceState, len(services))
	for i := range services {
		name := services[i].ServiceName()
		if out[name] == nil {
			out[name] = &serviceState{}
		}
	}
	for _, p := range ports {
		addPort(&out[p.Service].objs, p, node)
	}
	for _, pr := range problems {
		s := out[pr.Service]
		s.problems = append(s.problems, pr)
	}
	return out
}

// rewrite is a service whose objects a sync writes, and what the table held for it.
type rewrite = struct{ old, cur *serviceState }

// writeServices writes the chains and affinity sets of the services given: in a full
// sync all of them; in a partial one the chains whose rules differ from what the table
// holds. Chains come first, empty, since rules and elements refer to them.
func (u *Update) writeServices(services []rewrite) {
	var write []*chain
	for _, s := range services {
		held := map[string]uint64{}
		heldSets := map[string]time.Duration{}
		if s.old != nil {
			for _, c := range s.old.held {
				held[c.name] = c.digest
			}
			for _, set := range s.old.objs.sets {
				heldSets[set.name] = set.timeout
			}
		}
		for _, set := range s.cur.objs.sets {
			timeout, ok := heldSets[set.name]
			if ok && timeout == set.timeout {
				continue
			}
			if ok {
				// A set's timeout cannot change in place; it is recreated (its entries,
				// the clients' affinities, are lost, as when kube-proxy changes it).
				u.Tx.Delete(&knftables.Set{Name: set.name})
			}
			u.Tx.Add(&knftables.Set{Name: set.name, Type: u.node.addrType,
				Flags: []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag}, Timeout: ptr(set.timeout)})
		}
		for i := range s.cur.objs.chains {
			c := &s.cur.objs.chains[i]
			if digest, ok := held[c.name]; ok && digest == u.table.digest(c.rules) {
				continue
			}
			u.Tx.Add(&knftables.Chain{Name: c.name})
			if !u.Full {
				u.Tx.Flush(&knftables.Chain{Name: c.name})
			}
			u.unstale(c.name)
			write = append(write, c)
		}
	}
	for _, c := range write {
		for _, r := range c.rules {
			rl := &knftables.Rule{Chain: c.name, Rule: r.text}
			if r.comment != "" {
				rl.Comment = ptr(r.comment)
			}
			u.Tx.Add(rl)
		}
	}
}

// staleObjects flushes the chains old had and cur has not (they are deleted by a later
// StaleChains, once no element can still point to them), and deletes such affinity
// sets at the end of the transaction, after the rules using them are gone.
func (u *Update) staleObjects(old, cur *serviceState, now time.Time) {
	if old == nil {
		return
	}
	keep := map[string]bool{}
	if cur != nil {
		for _, c := range cur.objs.chains {
			keep[c.name] = true
		}
		for _, s := range cur.objs.sets {
			keep[s.name] = true
		}
	}
	for _, c := range old.held {
		if !keep[c.name] {
			u.Tx.Flush(&knftables.Chain{Name: c.name})
			u.staleChain(c.name, now)
		}
	}
	for _, s := range old.objs.sets {
		if !keep[s.name] {
			u.deleteSets = append(u.deleteSets, s.name)
		}
	}
}

func (u *Update) staleChain(name string, now time.Time) {
	if u.stale == nil {
		u.stale = maps.Clone(u.table.stale)
		if u.stale == nil {
			u.stale = map[string]time.Time{}
		}
	}
	u.stale[name] = now
}

// unstale keeps a chain written again from being deleted as stale.
func (u *Update) unstale(name string) {
	if _, ok := u.table.stale[name]; ok && u.stale == nil {
		u.stale = maps.Clone(u.table.stale)
	}
	delete(u.stale, name)
}

func elementID(e *element) string { return e.container + "\x00" + key(e.key) }

// diffElements records that service name wants cur's elements instead of old's.
func (u *Update) diffElements(name model.ServiceName, old, cur *serviceState) {
	if old != nil {
		for i := range old.objs.elements {
			st := u.element(&old.objs.elements[i])
			st.owners = slices.DeleteFunc(st.owners, func(o elementOwner) bool { return o.name == name })
		}
	}
	if cur != nil {
		for i := range cur.objs.elements {
			st := u.element(&cur.objs.elements[i])
			st.owners = append(st.owners, elementOwner{name: name, e: &cur.objs.elements[i]})
		}
	}
}

// element returns the pending state of an element, copied from the table's on first use.
func (u *Update) element(e *element) *elementState {
	id := elementID(e)
	if st, ok := u.elements[id]; ok {
		return st
	}
	st := &elementState{}
	if !u.Full {
		if held, ok := u.table.elements[id]; ok {
			st.owners = slices.Clone(held.owners)
			st.applied = held.applied
		}
	}
	u.elements[id] = st
	return st
}

// writeElements adds and deletes the elements whose winner changed.
func (u *Update) writeElements() {
	ids := slices.Sorted(maps.Keys(u.elements))
	var deletes, adds []*knftables.Element
	for _, id := range ids {
		st := u.elements[id]
		var want *element
		var wantOwner model.ServiceName
		for _, o := range st.owners {
			if want == nil || compareNames(o.name, wantOwner) < 0 {
				want, wantOwner = o.e, o.name
			}
		}
		// An element whose comment alone changed (a port renamed) is replaced too: nft's
		// add of an existing key changes nothing, and kube-proxy leaves such comments stale.
		if want != nil && st.applied != nil && slices.Equal(want.value, st.applied.value) && want.comment == st.applied.comment {
			st.applied = want
			continue
		}
		if st.applied != nil {
			deletes = append(deletes, nftElement(st.applied, false))
		}
		if want != nil {
			adds = append(adds, nftElement(want, true))
		}
		st.applied = want
	}
	for _, e := range deletes {
		u.Tx.Delete(e)
	}
	for _, e := range adds {
		u.Tx.Add(e)
	}
	for _, name := range u.deleteSets {
		u.Tx.Delete(&knftables.Set{Name: name})
	}
}

func nftElement(e *element, withValue bool) *knftables.Element {
	out := &knftables.Element{Key: e.key}
	if e.value == nil {
		out.Set = e.container
	} else {
		out.Map = e.container
	}
	if withValue {
		out.Value = e.value
		if e.comment != "" {
			out.Comment = ptr(e.comment)
		}
	}
	return out
}

// problems lists the skipped input of every service after the update.
func (u *Update) problems() []model.Problem {
	var out []model.Problem
	for name, s := range u.table.services {
		if _, ok := u.services[name]; !ok && !u.Full {
			out = append(out, s.problems...)
		}
	}
	for _, s := range u.services {
		if s != nil {
			out = append(out, s.problems...)
		}
	}
	return out
}

// Commit records that the table now holds what the update's transaction wrote.
func (u *Update) Commit() {
	t := u.table
	if u.Full {
		t.services = map[model.ServiceName]*serviceState{}
		t.elements = map[string]*elementState{}
		t.stale = map[string]time.Time{}
		t.rules = u.setupRules
	}
	t.node, t.nodeWas = u.node, u.nodeWas
	for name, s := range u.services {
		if old := t.services[name]; old != nil {
			t.rules -= old.rules()
		}
		if s == nil {
			delete(t.services, name)
			continue
		}
		t.hold(s)
		t.rules += s.rules()
		t.services[name] = s
	}
	for id, st := range u.elements {
		if len(st.owners) == 0 {
			delete(t.elements, id)
		} else {
			t.elements[id] = st
		}
	}
	if u.stale != nil {
		t.stale = u.stale
	}
}

// Rules counts the rules in the table's chains after the last committed Update.
func (t *Table) Rules() int { return t.rules }

// rules counts the rules of a committed service's chains.
func (s *serviceState) rules() int {
	n := 0
	for _, c := range s.held {
		n += c.rules
	}
	return n
}

// hold turns a built service state into its committed form: chains by name, rule count
// and digest.
func (t *Table) hold(s *serviceState) {
	s.held = make([]heldChain, len(s.objs.chains))
	for i, c := range s.objs.chains {
		s.held[i] = heldChain{name: c.name, rules: len(c.rules), digest: t.digest(c.rules)}
	}
	s.objs.chains = nil
}

// digest sums a chain's rules, text and comment, so that a sync can tell a chain whose
// rules changed. It is 64 bits with a seed chosen per process: a changed chain wrongly
// taken as unchanged is a 2⁻⁶⁴ chance per comparison, and would last only until the
// next full sync.
func (t *Table) digest(rules []rule) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	for _, r := range rules {
		h.WriteString(r.text)
		h.WriteByte(0)
		h.WriteString(r.comment)
		h.WriteByte(0)
	}
	return h.Sum64()
}

// StaleChains adds to tx the deletion of the chains flushed at least StaleChainDelay
// before now, forgets them, and returns how many. kube-proxy runs this transaction
// apart from the sync, so that its failure cannot hold the sync back; a chain whose
// deletion failed is flushed again by the next full sync, which recreates the table.
func (t *Table) StaleChains(tx *knftables.Transaction, now time.Time) int {
	n := 0
	for _, name := range slices.Sorted(maps.Keys(t.stale)) {
		if now.Sub(t.stale[name]) < StaleChainDelay {
			continue
		}
		tx.Delete(&knftables.Chain{Name: name})
		delete(t.stale, name)
		n++
	}
	return n
}
