package trees

import "errors"

// ParseLightGBM reads a LightGBM text model.
func ParseLightGBM(data []byte) (*Model, error) { return nil, errors.New("todo") }

// ParseLightGBMJSON reads LightGBM's JSON dump.
func ParseLightGBMJSON(data []byte) (*Model, error) { return nil, errors.New("todo") }
