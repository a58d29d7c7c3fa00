package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelSelector selects objects by label. It reads and writes the same YAML as
// metav1.LabelSelector (so MetalLB manifests apply unchanged), but its lists and
// strings are bounded and its rules are checked at admission, as Kubernetes checks
// its own selectors: the API server prices CEL rules before it accepts a CRD and
// can only price them over bounded data, which metav1.LabelSelector's schema is
// not. The bounds: 32 matchLabels, 16 matchExpressions, 32 values per expression,
// keys of at most 317 characters (a 253-character prefix, "/", a 63-character
// name), values of at most 63; the fields holding selectors take at most 16. They
// are as large as the budget allows (32 selectors already exceed it).
type LabelSelector struct {
	// MatchLabels is a map of label keys and values; an object must carry every
	// one. Keys are qualified names ("app", "kubernetes.io/hostname"), values
	// label values (at most 63 characters, possibly empty). At most 32 entries.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !format.qualifiedName().validate(k).hasValue())`,messageExpression=`'key "' + self.filter(k, format.qualifiedName().validate(k).hasValue())[0] + '" is not a qualified name: an optional DNS subdomain prefix of at most 253 characters and "/", then a name of at most 63 alphanumerics, "-", "_" or "." that begins and ends with an alphanumeric (like "app" or "kubernetes.io/hostname")'`
	// +optional
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`

	// MatchExpressions are label requirements; an object must meet every one.
	// At most 16.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is the value of a label: empty, or at most 63 alphanumerics, "-",
// "_" or "." that begins and ends with an alphanumeric.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:XValidation:rule=`!format.labelValue().validate(self).hasValue()`,messageExpression=`'value "' + self + '" is not a label value: empty, or at most 63 alphanumerics, "-", "_" or "." that begins and ends with an alphanumeric'`
type LabelValue string

// LabelSelectorRequirement is one requirement of a LabelSelector: a key, an
// operator and values.
// +kubebuilder:validation:XValidation:rule=`self.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist']`,messageExpression=`'operator "' + self.operator + '" is not one of In, NotIn, Exists, DoesNotExist'`,fieldPath=`.operator`
// +kubebuilder:validation:XValidation:rule=`!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)`,messageExpression=`'operator ' + self.operator + ' needs at least one value'`,fieldPath=`.values`
// +kubebuilder:validation:XValidation:rule=`!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0`,messageExpression=`'operator ' + self.operator + ' takes no values, got "' + self.values.join('", "') + '"'`,fieldPath=`.values`
type LabelSelectorRequirement struct {
	// Key is the label key the requirement applies to: a qualified name such as
	// "app" or "node-role.kubernetes.io/control-plane".
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule=`!format.qualifiedName().validate(self).hasValue()`,messageExpression=`'key "' + self + '" is not a qualified name: an optional DNS subdomain prefix of at most 253 characters and "/", then a name of at most 63 alphanumerics, "-", "_" or "." that begins and ends with an alphanumeric (like "app" or "kubernetes.io/hostname")'`
	Key string `json:"key"`

	// Operator relates the key to the values: In, NotIn, Exists or
	// DoesNotExist.
	Operator metav1.LabelSelectorOperator `json:"operator"`

	// Values: at least one for In and NotIn, none for Exists and DoesNotExist.
	// Each is a label value (at most 63 characters, possibly empty). At most
	// 32.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule=`!format.labelValue().validate(self).hasValue()`,messageExpression=`'value "' + self + '" is not a label value: empty, or at most 63 alphanumerics, "-", "_" or "." that begins and ends with an alphanumeric'`
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// Metav1 returns the selector as a metav1.LabelSelector.
func (s *LabelSelector) Metav1() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if s.MatchLabels != nil {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return out
}

// AsSelector converts the selector into a labels.Selector, as
// metav1.LabelSelectorAsSelector does (an empty selector selects everything).
func (s *LabelSelector) AsSelector() (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s.Metav1())
}
