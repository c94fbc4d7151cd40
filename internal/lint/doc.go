// Package lint holds no code: its tests check rules of the source tree that
// the compiler does not, such as which packages may start processes.
package lint
